"""Exports of an assessment campaign: judgments (assessors pseudonymised), decisions, the new gold
in
the task's format, TREC qrels, agreement as JSON and SVG."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from sqlmodel import Session, select

from server.actions.adjudication import decisions
from server.actions.campaigns import agreement, for_organizer
from server.actions.common import action
from server.actions.common import task as find_task
from server.boards import plots
from server.domain import goldversions
from server.models import (
    CampaignAssignment,
    CampaignItem,
    Judgment,
    Phase,
    User,
)
from server.settings import get_settings
from tasks.store import TaskStore


def qrels_id(seg_id: str) -> str:
    """A segment id as a TREC qrels field: whitespace-separated files cannot hold its spaces,
    so "%" and whitespace are percent-encoded (`urllib.parse.unquote`
    gives the id back)."""
    return "".join(f"%{ord(ch):02X}" if ch == "%" or ch.isspace() else ch for ch in seg_id)


def _pseudonyms(rows) -> dict[int, str]:
    """A1..An for the assessors, in the order of their user ids (stable across exports)."""
    return {uid: f"A{k}" for k, uid in enumerate(sorted({r[0] for r in rows}), start=1)}


@action
def export_files(*, s: Session, actor: User | None, campaign: int) -> dict[str, bytes]:
    """A campaign's export as file name -> bytes: `judgments.csv` (assessors pseudonymised A1..An,
    no emails), `decisions.csv`, `gold/` (the split's gold as the store holds it, after a close
    the new version), `qrels.txt` (TREC: `query 0 source rel`; links tasks), `agreement.json` and
    `agreement.svg` (its organizers)."""
    c, _comp = for_organizer(s, actor, campaign)
    t = find_task(c.task_id)
    phase = s.get(Phase, c.phase_id)
    store = TaskStore(t.id, get_settings().home)
    q = (
        select(CampaignAssignment.user_id, CampaignItem.key, Judgment)
        .join(CampaignItem, CampaignItem.id == CampaignAssignment.item_id)
        .join(Judgment, Judgment.assignment_id == CampaignAssignment.id)
        .where(CampaignAssignment.campaign_id == c.id)
    )
    rows = sorted(s.exec(q), key=lambda r: (r[1], r[0]))
    alias = _pseudonyms(rows)
    out: dict[str, bytes] = {}

    def table(header, body) -> bytes:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        w.writerows(body)
        return buf.getvalue().encode("utf-8")

    def when(d) -> str:
        return d.replace(microsecond=0).isoformat() + "Z"

    out["judgments.csv"] = table(
        ("item", "assessor", "label", "comment", "judged_at"),
        [(key, alias[uid], j.label, j.comment, when(j.updated_at)) for uid, key, j in rows],
    )
    items = {i.id: i for i in s.exec(select(CampaignItem).where(CampaignItem.campaign_id == c.id))}
    decided = sorted(decisions(s, c).values(), key=lambda d: items[d.item_id].key)
    out["decisions.csv"] = table(
        ("item", "label", "rule", "reason", "decided_at"),
        [(items[d.item_id].key, d.label, d.rule, d.reason, when(d.decided_at)) for d in decided],
    )
    gold_dir = store.root / "gold" / phase.split
    for p in sorted(gold_dir.rglob("*")) if gold_dir.is_dir() else []:
        if p.is_file():
            out[f"gold/{p.relative_to(gold_dir).as_posix()}"] = p.read_bytes()
    if t.kind == "links":
        rel = {
            (q_, s_): 1 for q_, s_ in goldversions.link_rows(store.gold(phase.split, "links.csv"))
        }
        for q_, s_ in goldversions.link_rows(store.gold(phase.split, goldversions.JUDGED)):
            rel.setdefault((q_, s_), 0)
        out["qrels.txt"] = "".join(
            f"{qrels_id(q_)} 0 {qrels_id(s_)} {r}\n" for (q_, s_), r in sorted(rel.items())
        ).encode("utf-8")
    ag = agreement(s=s, actor=actor, campaign=c.id)
    out["agreement.json"] = (
        json.dumps(ag.model_dump(mode="json", exclude_unset=True), indent=2, sort_keys=True) + "\n"
    ).encode("utf-8")
    ov = dict(ag.overall, level="overall", items=ag.counts["complete_items"])
    out["agreement.svg"] = plots.forest([ov], f"{t.id}: campaign {c.id}, multi-kappa")
    return out


@action
def export_campaign(*, s: Session, actor: User | None, campaign: int, dest: Path) -> list[Path]:
    """Write the campaign's export (`export_files`) under `dest`; returns the paths written."""
    written = []
    for name, body in export_files(s=s, actor=actor, campaign=campaign).items():
        p = Path(dest) / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body)
        written.append(p)
    return written
