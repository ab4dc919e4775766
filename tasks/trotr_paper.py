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


# ------------------------------------------------------------------ Appendix H (Table 5)

TABLE5_SOURCE = (
    "Periti et al. (EMNLP 2024), Appendix H, Table 5: per biblical passage, Krippendorff's alpha, "
    "the average pairwise Spearman and the number of pairs, on all pairs / after filtering"
)
# passage: (reused text, alpha, alpha filtered, rho, rho filtered, pairs, pairs filtered)
TABLE5 = {
    "Matthew 18:22": ("Seventy times seven", 0.118, 0.764, 0.619, 0.857, 150, 95),
    "John 17:21": ("That all may be one", 0.494, 0.677, 0.183, 0.782, 150, 79),
    "Matthew 5:39": ("Turn the other cheek", -0.036, 0.193, 0.51, 0.405, 120, 132),
    "Matthew 7:7": ("Seek and you will find", 0.21, 0.097, 0.558, 0.475, 150, 125),
    "Psalm 23:1": ("The Lord is my shepherd", 0.213, 0.138, 0.476, 0.431, 150, 117),
    "John 8:32": ("The truth will set you free", 0.25, 0.217, 0.347, 0.368, 150, 10),
    "1 Corinthians 13:4": ("Love is patient, love is kind", 0.282, 0.798, 0.382, 0.834, 150, 61),
    "Matthew 7:1": ("Judge not, that ye be not judged", 0.472, 0.45, 0.555, 0.469, 150, 96),
    "Ecclesiastes 3:1": ("For everything there is a season", 0.263, 0.369, 0.443, 0.557, 150, 104),
    "Romans 8:28": ("All things work together for good", 0.11, -0.03, 0.543, 0.43, 150, 128),
    "2 Corinthians 5:7": (
        "For we walk by faith, not by sight",
        0.383,
        0.823,
        0.437,
        0.866,
        150,
        79,
    ),
    "Psalm 121:7": ("The Lord will keep you from all harm", 0.169, 0.178, 0.213, 0.166, 150, 103),
    "Mark 12:17": ("Give to Caesar what belongs to Caesar", 0.196, 0.117, 0.46, 0.522, 150, 106),
    "Proverbs 27:5": (
        "Better is open rebuke than hidden love",
        0.431,
        0.828,
        0.481,
        0.911,
        150,
        95,
    ),
    "Exodus 20:3": ("You shall have no other gods before me", 0.259, 0.506, 0.331, 0.646, 150, 80),
    "Genesis 1:1": ("In the beginning God created the heaven", 0.151, 0.177, 0.219, 0.277, 150, 66),
    "Romans 12:10": (
        "Love one another with brotherly affection",
        0.41,
        0.566,
        0.571,
        0.657,
        150,
        101,
    ),
    "Leviticus 20:13": (
        "If a man lies with a male as with a woman",
        0.315,
        0.492,
        0.339,
        0.517,
        150,
        86,
    ),
    "Joshua 1:9": (
        "Be strong and courageous. Do not be afraid",
        0.223,
        0.822,
        0.281,
        0.833,
        150,
        69,
    ),
    "Mark 9:23": (
        "Everything is possible for one who believes",
        0.081,
        0.509,
        0.118,
        0.557,
        150,
        81,
    ),
    "Philippians 4:13": (
        "I can do all things through Christ who strengthens me",
        0.128,
        0.624,
        0.349,
        0.787,
        150,
        73,
    ),
    "Ephesians 5:25": (
        "Husbands, love your wives, as Christ loved the church",
        0.487,
        0.802,
        0.507,
        0.802,
        150,
        95,
    ),
    "Matthew 5:44": (
        "Love your enemies and pray for those who persecute you",
        0.073,
        -0.004,
        0.389,
        0.532,
        150,
        104,
    ),
    "John 15:12": (
        "My command is this: Love each other as I have loved you",
        0.288,
        0.589,
        0.426,
        0.79,
        150,
        97,
    ),
    "Isaiah 43:4": (
        "You are precious in my eyes and honored, and I love you",
        0.421,
        0.439,
        0.625,
        0.73,
        150,
        110,
    ),
    "Matthew 7:25": (
        "The rain came down, the streams rose, and the winds blew",
        0.166,
        0.625,
        0.406,
        0.802,
        150,
        71,
    ),
    "1 Timothy 2:12": (
        "But I suffer not a woman to teach, nor to usurp authority",
        0.302,
        0.232,
        0.315,
        0.217,
        150,
        71,
    ),
    "Proverbs 10:12": (
        "Hatred stirs up conflict, but love covers over all wrongs",
        0.172,
        0.148,
        0.377,
        0.517,
        150,
        100,
    ),
    "Hosea 8:7": (
        "They have sown the wind, and they shall reap the whirlwind",
        0.261,
        0.621,
        0.423,
        0.668,
        150,
        55,
    ),
    "Proverbs 12:25": (
        "Anxiety weighs down the heart, but a kind word cheers it up",
        0.093,
        0.518,
        0.253,
        0.777,
        150,
        81,
    ),
    "1 John 4:8": (
        "Whoever does not love does not know God, because God is love",
        0.329,
        0.355,
        0.373,
        0.393,
        150,
        121,
    ),
    "Solomon 4:7": (
        "You are altogether beautiful, my darling; there is no flaw in you",
        0.385,
        0.782,
        0.537,
        0.878,
        150,
        92,
    ),
    "Leviticus 18:22": (
        "You shall not lie with a male as with a woman; it is an abomination",
        0.423,
        0.648,
        0.458,
        0.753,
        150,
        101,
    ),
    "Psalm 118:24": (
        "This is the day that the Lord has made; let us rejoice and be glad in it",
        0.294,
        0.847,
        0.492,
        0.884,
        150,
        77,
    ),
    "Proverbs 31:10": (
        "A wife of noble character who can find? She is worth far more than rubies",
        0.108,
        0.775,
        0.261,
        0.797,
        150,
        74,
    ),
    "John 15:13": (
        "Greater love has no one than this: to lay down one's life for one's friends",
        0.347,
        0.355,
        0.64,
        0.737,
        150,
        125,
    ),
    "Matthew 11:28": (
        "Come to me, all you who labour and are overburdened, and I shall give you rest",
        -0.007,
        -0.024,
        0.268,
        0.355,
        150,
        101,
    ),
    "Jeremiah 17:9": (
        "The heart is deceitful above all things, and desperately wicked; who can know it?",
        0.164,
        0.432,
        0.311,
        0.591,
        150,
        75,
    ),
    "Hebrews 11:1": (
        "Now faith is confidence in what we hope for and assurance about what we do not see",
        0.391,
        0.853,
        0.41,
        0.87,
        150,
        72,
    ),
    "Luke 17:3": (
        "Take heed to yourselves. If your brother sins against "
        "you, rebuke him; and if he repents, forgive him",
        -0.011,
        0.267,
        0.124,
        0.485,
        150,
        91,
    ),
    "2 Corinthians 5:17": (
        "Therefore, if anyone is in Christ, he is a new "
        "creation. The old has passed away; behold, the new has come",
        0.307,
        0.655,
        0.414,
        0.744,
        150,
        75,
    ),
    "1 Samuel 16:7": (
        "The Lord does not look at the things people look at. People "
        "look at the outward appearance, but the Lord looks at the heart",
        0.432,
        0.665,
        0.508,
        0.733,
        150,
        80,
    ),
}
TABLE5_OVERALL = (0.420, 0.709, 0.506, 0.811, 6300, 3821)
TABLE5_COLUMNS = (
    "alpha",
    "alpha_filtered",
    "spearman",
    "spearman_filtered",
    "pairs",
    "pairs_filtered",
)

# The cells where the release's judgments give another figure than the table prints (each
# computed by `tasks.agreement.trotr_targets`, tests/test_agreement_targets.py): the two alphas of
# Matthew 18:22 and John 17:21 are each other's; Matthew 5:39's row has 150 pairs (120 printed in
# the all-pairs column, and 132 filtered, more than it has), and its filtered alpha is -.193 (the
# sign lost); John 8:32 keeps 101 pairs (10 printed); the other counts and the four last-digit
# differences are as listed.
TABLE5_DIFFERS = {
    "Matthew 18:22": ("alpha",),
    "John 17:21": ("alpha",),
    "Matthew 5:39": ("alpha_filtered", "pairs", "pairs_filtered"),
    "John 8:32": ("pairs_filtered",),
    "Romans 8:28": ("pairs_filtered",),
    "Proverbs 27:5": ("pairs_filtered",),
    "Psalm 121:7": ("spearman",),
    "Ephesians 5:25": ("spearman",),
    "Jeremiah 17:9": ("spearman_filtered",),
    "Hebrews 11:1": ("spearman",),
}
