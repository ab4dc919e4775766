"""The task families and metrics a task can declare: the one list of their names.

Each family declares the unit its scores are resampled by, the per-unit statistics it offers, the
files it reads and whether runs of it can be pooled for assessment. Each metric declares the
families it is computed for, whether it may be a task's primary metric, and how it resamples: the
per-unit statistics it is computed from and the form of the function that makes the score of them

- `sums`: a function of the weighted sums of the per-unit statistics (as sacreBLEU turns
  per-segment statistics into a corpus score): a resample's score is that function of the sums
  weighted by the multiplicities;
- `exact`: an exact weighted form (Spearman on each resample's own average ranks, Kendall's tau-b
  from weighted pairs), equal to the scorer's value on the resampled file;
- `rerun`: the scorer's own metric function run on each resample (each drawn copy of a unit a unit
  of its own);
- `None`: not resampled (a count): never a primary metric.

A primary metric needs intervals, so it must resample on its family (`primary_metrics`). `scorer/`
attaches the implementations (`scorer.metrics.REGISTRY`, `scorer.bootstrap`); a test refuses a
name here without one there and one there without a name here. Nothing here imports the scorer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FamilyDecl:
    name: str
    unit: str  # what is drawn by the bootstrap, singular ("document")
    statistics: tuple[str, ...]  # the per-unit statistics the family's resampler offers
    inputs: tuple[str, ...]  # the files of a split's inputs the family reads
    gold: str  # the name its gold is installed under
    # what the public inputs of a split whose gold is hidden may carry: the columns named here
    # (a CSV family's closed set), or, where none are named, besides the key, the group and the
    # fold, fields of text only (a number, a list or a number written as text could be gold)
    input_columns: tuple[str, ...]
    poolable: bool  # runs can be pooled for assessment (a campaign)
    description: str
    resampled: str = ""  # what a board's intervals say they resample ("queries")


@dataclass(frozen=True)
class MetricDecl:
    name: str
    families: tuple[str, ...]
    statistics: str  # the per-unit statistics it is computed from (one of its family's)
    resample: str | None  # "sums", "exact", "rerun" or None (see the module's docstring)
    primary: bool = True  # may be a task's primary metric (a score, not a count)
    greater_is_better: bool | None = True  # None: a count, no direction
    count: bool = False  # counts units: summed over folds, printed as an integer
    description: str = ""
    # families among `families` it does not resample on (an exact form too costly there)
    no_resample_on: tuple[str, ...] = ()
    # (family, statistics) where a family computes it from other statistics than `statistics`
    statistics_by_family: tuple[tuple[str, str], ...] = ()
    # the kind of predicted value it needs (a submission field's kind), if any
    needs_value: str | None = None

    def statistics_on(self, family: str) -> str:
        return dict(self.statistics_by_family).get(family, self.statistics)

    def resamples_on(self, family: str) -> bool:
        return (
            self.resample is not None
            and family in self.families
            and family not in self.no_resample_on
        )


_PAIRS = ("instances",)  # labels 0/1 per item; a target's value is a graded score
_VALUES = ("instances", "targets", "tokens")

FAMILY_LIST: tuple[FamilyDecl, ...] = (
    FamilyDecl(
        "instances",
        unit="instance",
        statistics=("confusion", "moments", "values"),
        inputs=("inputs.jsonl",),
        gold="gold.jsonl",
        input_columns=(),
        poolable=True,
        description="one value (a label or a score) per instance, keyed by its id",
        resampled="instances",
    ),
    FamilyDecl(
        "targets",
        unit="target",
        statistics=("confusion", "moments", "values"),
        inputs=("targets.jsonl",),
        gold="gold.jsonl",
        input_columns=(),
        poolable=False,
        description="one score per target (a word or phrase), aggregated over its uses",
        resampled="targets",
    ),
    FamilyDecl(
        "tokens",
        unit="document",
        statistics=("moments", "values"),
        inputs=("inputs.jsonl",),
        gold="gold.jsonl",
        input_columns=(),
        poolable=False,
        description="one score per token of each document pair, compared over a group's tokens",
        resampled="documents (within each language pair)",
    ),
    FamilyDecl(
        "links",
        unit="query",
        statistics=("link counts", "ranked links"),
        inputs=("queries.csv", "sources.csv"),
        gold="links.csv",
        input_columns=("seg_id", "text"),
        poolable=True,
        description="predicted (query, source) links, optionally scored to rank them",
        resampled="queries",
    ),
    FamilyDecl(
        "spans",
        unit="document pair",
        statistics=("span counts",),
        inputs=("pairs.jsonl", "documents.jsonl"),
        gold="gold.jsonl",
        input_columns=("id", "suspicious", "source", "text"),
        poolable=False,
        description="detections of reused text: pairs of character spans (offset and length in "
        "the suspicious and the source document) per document pair, scored as PAN scores them",
        resampled="document pairs",
    ),
)

_CUTOFFS = (10, 100, 1000)
IR_CUTOFFS = _CUTOFFS

METRIC_LIST: tuple[MetricDecl, ...] = (
    MetricDecl(
        "f1",
        families=(*_PAIRS, "links"),
        statistics="confusion",
        statistics_by_family=(("links", "link counts"),),
        resample="sums",
        needs_value="label01",
        description="weighted F1: each label's F1 weighted by its gold support "
        "(links: mean F1 of the queries with a gold link)",
    ),
    *(
        MetricDecl(
            f"{what}_{c}",
            families=_PAIRS,
            statistics="confusion",
            resample="sums",
            needs_value="label01",
            description=f"{what} of label {c}",
        )
        for c in (0, 1)
        for what in ("precision", "recall", "f1")
    ),
    MetricDecl(
        "spearman",
        families=_VALUES,
        statistics="values",
        resample="exact",
        description="Spearman's rank correlation (average ranks for ties)",
    ),
    MetricDecl(
        "pearson",
        families=_VALUES,
        statistics="moments",
        resample="sums",
        description="Pearson's correlation",
    ),
    MetricDecl(
        "kendall",
        families=_VALUES,
        statistics="values",
        resample="exact",
        no_resample_on=("tokens",),
        description="Kendall's tau-b",
    ),
    MetricDecl(
        "precision",
        families=("links", "spans"),
        statistics="link counts",
        statistics_by_family=(("spans", "span counts"),),
        resample="sums",
        description="precision of a query's links, mean over the queries with a gold link "
        "(spans: a detection's characters in the cases it overlaps, mean over the detections)",
    ),
    MetricDecl(
        "recall",
        families=("links", "spans"),
        statistics="link counts",
        statistics_by_family=(("spans", "span counts"),),
        resample="sums",
        description="recall of a query's links, mean over the queries with a gold link "
        "(spans: a case's characters the detections overlapping it cover, mean over the cases)",
    ),
    MetricDecl(
        "accuracy",
        families=("links",),
        statistics="link counts",
        resample="sums",
        description="(TP + TN) / sources, mean over the queries with a gold link",
    ),
    *(
        MetricDecl(
            f"{what}_micro",
            families=("links", "spans") if what != "f1" else ("links",),
            statistics="link counts",
            statistics_by_family=(("spans", "span counts"),),
            resample="sums",
            description=f"{what} from the counts pooled over the queries with a gold link "
            "(spans: from the characters pooled, each document's counted once)",
        )
        for what in ("precision", "recall", "f1")
    ),
    MetricDecl(
        "granularity",
        families=("spans",),
        statistics="span counts",
        resample="sums",
        greater_is_better=False,
        description="detections overlapping a detected case, mean over the detected cases (PAN)",
    ),
    MetricDecl(
        "plagdet",
        families=("spans",),
        statistics="span counts",
        resample="sums",
        description="F1 of precision and recall over log2(1 + granularity) (PAN)",
    ),
    MetricDecl(
        "plagdet_micro",
        families=("spans",),
        statistics="span counts",
        resample="sums",
        description="plagdet of precision_micro and recall_micro (PAN's --micro)",
    ),
    *(
        MetricDecl(
            f"{level}_{what}",
            families=("spans",),
            statistics="span counts",
            resample="sums",
            description=f"{what} at {level} level (PAN 2014/2015, tau 0.5)",
        )
        for level in ("case", "document")
        for what in ("precision", "recall", "f1")
    ),
    *(
        MetricDecl(
            c,
            families=("spans",),
            statistics="span counts",
            resample="sums",
            primary=False,
            greater_is_better=None,
            count=True,
            description=f"{c} of the document pairs scored (identical detections once)",
        )
        for c in ("cases", "detections")
    ),
    MetricDecl(
        "smr",
        families=("links",),
        statistics="link counts",
        resample="sums",
        greater_is_better=False,
        description="(FP + FN) / N, N = queries x sources",
    ),
    MetricDecl(
        "fpr",
        families=("links",),
        statistics="link counts",
        resample="sums",
        greater_is_better=False,
        description="FP / N",
    ),
    MetricDecl(
        "fnr",
        families=("links",),
        statistics="link counts",
        resample="sums",
        greater_is_better=False,
        description="FN / N",
    ),
    *(
        MetricDecl(
            f"{what}@{k}",
            families=("links",),
            statistics="ranked links",
            resample="rerun",
            description=f"{desc} in the top {k}, mean over the queries with a gold link",
        )
        for k in _CUTOFFS
        for what, desc in (
            ("recall", "share of the gold links"),
            ("map", "average precision"),
            ("mrr", "reciprocal rank of the first gold link"),
            ("ndcg", "nDCG (binary gain)"),
        )
    ),
    *(
        MetricDecl(
            c,
            families=("links",),
            statistics="link counts",
            resample="sums",
            primary=False,
            greater_is_better=None,
            count=True,
            description=f"{c.upper()}: {desc} over every query x source pair",
        )
        for c, desc in (
            ("tp", "true positives"),
            ("fp", "false positives"),
            ("fn", "false negatives"),
            ("tn", "true negatives"),
        )
    ),
    MetricDecl(
        "n",
        families=("instances", "targets", "tokens", "links", "spans"),
        statistics="",
        resample=None,
        primary=False,
        greater_is_better=None,
        count=True,
        description="units scored (items, tokens, query x source pairs, or document pairs)",
    ),
)

FAMILIES: dict[str, FamilyDecl] = {f.name: f for f in FAMILY_LIST}
METRICS: dict[str, MetricDecl] = {m.name: m for m in METRIC_LIST}
COUNT_METRICS = frozenset(m.name for m in METRIC_LIST if m.count)


def family_metrics(family: str) -> list[str]:
    """The metrics a task of `family` may declare, in the catalogue's order."""
    return [m.name for m in METRIC_LIST if family in m.families]


def primary_metrics(family: str) -> list[str]:
    """The metrics a task of `family` may make its primary one: a score that resamples there."""
    return [m.name for m in METRIC_LIST if m.primary and m.resamples_on(family)]


def metric_problem(family: str, metric: str, value_kind: str | None = None) -> str | None:
    """Why `metric` cannot be declared by a task of `family` whose predicted value is of
    `value_kind` (None: it can)."""
    if family not in FAMILIES:
        return f"unknown family {family!r} (families: {', '.join(FAMILIES)})"
    if metric not in METRICS:
        return f"unknown metric {metric!r}"
    if family not in METRICS[metric].families:
        return (
            f"the {family} family does not compute {metric} "
            f"(its metrics: {', '.join(family_metrics(family))})"
        )
    need = METRICS[metric].needs_value
    if need and family != "links" and value_kind is not None and value_kind != need:
        fit = [m for m in family_metrics(family) if METRICS[m].needs_value in (None, value_kind)]
        return (
            f"{metric} needs {need} predictions, these are {value_kind} "
            f"(metrics that fit: {', '.join(fit)})"
        )
    return None


def primary_problem(family: str, metric: str) -> str | None:
    """Why `metric` cannot be the primary metric of a task of `family` (None: it can)."""
    bad = metric_problem(family, metric)
    if bad:
        return bad
    m = METRICS[metric]
    if not m.primary:
        why = "is a count, not a score"
    elif not m.resamples_on(family):
        why = f"has no bootstrap on the {family} family (no interval could be computed)"
    else:
        return None
    return f"{metric} {why}: the primary metric is one of {', '.join(primary_metrics(family))}"


def declaration_problems(
    family: str, metrics, primary_metric: str, value_kind: str | None = None
) -> list[str]:
    """What is wrong with a task of `family` declaring `metrics` with `primary_metric` first."""
    out = [p for m in metrics if (p := metric_problem(family, m, value_kind))]
    if primary_metric in metrics and not metric_problem(family, primary_metric):
        p = primary_problem(family, primary_metric)
        if p:
            out.append(p)
    return out


def markdown_table() -> str:
    """The families and their metrics, as docs/bundles.md shows them (a test checks it)."""
    lines = [
        "| family | unit | reads | metrics (primary-capable in bold) |",
        "|---|---|---|---|",
    ]
    for f in FAMILY_LIST:
        names = [f"**{n}**" if n in primary_metrics(f.name) else n for n in family_metrics(f.name)]
        lines.append(f"| `{f.name}` | {f.unit} | {', '.join(f.inputs)} | {', '.join(names)} |")
    lines += ["", "| metric | families | resampled by | definition |", "|---|---|---|---|"]
    for m in METRIC_LIST:
        how = {
            "sums": "weighted sums of per-unit statistics",
            "exact": "exact weighted form",
            "rerun": "the scorer on each resample",
            None: "not resampled (a count)",
        }[m.resample]
        if m.no_resample_on:
            how += f" (not on {', '.join(m.no_resample_on)})"
        lines.append(f"| `{m.name}` | {', '.join(m.families)} | {how} | {m.description} |")
    return "\n".join(lines) + "\n"
