"""Judgments of a campaign as a table: who judged which item, the items every assigned assessor
judged (what agreement measures), and the digest of exactly what a Bayesian fit reads."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from sqlmodel import Session, select

from server.models import (
    AssessmentCampaign,
    CampaignAssignment,
    CampaignItem,
    Judgment,
)
from tasks import agreement_measures as am


def judgment_rows(s: Session, c: AssessmentCampaign) -> tuple[list, dict[int, dict], dict]:
    """(user id, item id, label) of every stored judgment, each item's factors, and how many
    assessors each item was assigned to."""
    q = (
        select(CampaignAssignment.user_id, CampaignAssignment.item_id, Judgment.label)
        .join(Judgment, Judgment.assignment_id == CampaignAssignment.id)
        .where(CampaignAssignment.campaign_id == c.id)
    )
    rows = list(s.exec(q))
    factors = {
        i.id: i.factors
        for i in s.exec(select(CampaignItem).where(CampaignItem.campaign_id == c.id))
    }
    assigned: dict[int, int] = defaultdict(int)
    for iid in s.exec(
        select(CampaignAssignment.item_id).where(CampaignAssignment.campaign_id == c.id)
    ):
        assigned[iid] += 1
    return rows, factors, assigned


@dataclass
class Judged:
    """The campaign's judgments as the agreement measures read them: the table over the items
    every assigned assessor judged (labels coded by their declared order), its item ids in the
    table's row order, every item's factors, the stored rows and the assignments per item."""

    table: am.Table
    kept: list[int]
    factors: dict[int, dict]
    rows: list
    assigned: dict[int, int]
    complete: set[int]


def judged_table(s: Session, c: AssessmentCampaign) -> Judged:
    """The table `agreement` measures (and the Bayesian model fits): the items every assigned
    assessor judged, one column per assessor."""
    rows, factors, assigned = judgment_rows(s, c)
    done: dict[int, int] = defaultdict(int)
    for _u, iid, _label in rows:
        done[iid] += 1
    complete = {iid for iid, n in done.items() if n == assigned[iid]}
    code = {label: float(k) for k, label in enumerate(c.labels)}
    table, kept = am.table_from_rows(
        [(str(u), str(iid), code[label]) for u, iid, label in rows if iid in complete],
        labels=[float(k) for k in range(len(c.labels))],
    )
    return Judged(table, [int(x) for x in kept], factors, rows, assigned, complete)


OVERLAP_ORDINAL = {"0": 0.0, "1": 1.0, "2-3": 2.0, "4+": 3.0}


GROUP_FACTORS = ("source_work", "stratum")
# a pooled link's proposing runs, as one level per set of runs: the analogue of the paper's
# retrieval method (its grouping factor after the book's analogue)
PROPOSED_BY = "proposed_by"
# a link whose query already had a gold link: the analogue of the paper's Known, a 0/1 flag
KNOWN = {"no": 0.0, "yes": 1.0}


def _runs_level(runs) -> str | None:
    if not isinstance(runs, list) or not runs:
        return None
    return "runs " + "+".join(str(r) for r in sorted(runs))


def fit_inputs(s: Session, c: AssessmentCampaign) -> dict:
    """What the model fits: the agreement table (items every assigned assessor judged), the items'
    grouping factors (a link's source work, a pair's stratum: the paper's book, first; a link's
    proposing runs: the paper's retrieval method) and covariates (a link's lexical overlap bucket
    as an ordinal 0-3 and whether its query already had a gold link, the paper's Known; pairs
    have none); a factor or covariate with one value is left out; how many judgments are stored
    and a sha256 digest of exactly that (the table's values, assessors, items, groups and
    covariates)."""
    judged = judged_table(s, c)
    table, kept, factors = judged.table, judged.kept, judged.factors
    groups: dict[str, np.ndarray] = {}
    covariates: dict[str, np.ndarray] = {}
    of = [factors.get(iid) or {} for iid in kept]
    for name in GROUP_FACTORS:
        if of and all(name in f for f in of):
            groups[name] = np.asarray([str(f[name]) for f in of])
            break
    levels = [_runs_level(f.get("run")) for f in of]
    if of and None not in levels and len(set(levels)) > 1:  # one level has no intercept to fit
        groups[PROPOSED_BY] = np.asarray(levels)
    if of and all(f.get("overlap") in OVERLAP_ORDINAL for f in of):
        v = np.asarray([OVERLAP_ORDINAL[f["overlap"]] for f in of])
        if np.unique(v).size > 1:  # a constant covariate has no slope to fit
            covariates["overlap"] = v
    if of and all(f.get("query_had_gold") in KNOWN for f in of):
        v = np.asarray([KNOWN[f["query_had_gold"]] for f in of])
        if np.unique(v).size > 1:
            covariates["known"] = v
    payload = {
        "assessors": list(table.annotators),
        "items": kept,
        "values": [[None if np.isnan(x) else int(x) for x in row] for row in table.values],
        "groups": {k: v.tolist() for k, v in groups.items()},
        "covariates": {k: v.tolist() for k, v in covariates.items()},
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return {
        "table": table,
        "groups": groups,
        "covariates": covariates,
        "items": len(kept),
        "assessors": len(table.annotators),
        "judgments": len(judged.rows),
        "digest": digest,
    }


def positive_keys(c: AssessmentCampaign) -> set[str]:
    return set(c.positive or [c.labels[0]])
