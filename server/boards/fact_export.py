"""The fact sheets of a published final ranking, for the organizers' overview paper: for each row
of the published version (its submission ids, read from the snapshot), the team and method as
published, the submission id and every fact the competition declares, as the database holds them
now. The snapshot itself is never touched (it stays byte for byte)."""

from __future__ import annotations

import csv
import io
import json

from sqlmodel import Session, select

from server.domain import people
from server.domain.facts import shown
from server.exceptions import Forbidden
from server.models import RankingVersion, Submission

FORMATS = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


def fact_rows(s: Session, rv: RankingVersion) -> tuple[list[dict], list[dict]]:
    """(the declared fields, one dict per row of the published version that names a run)."""
    c = people.competition_of_task(s, rv.task_id)
    fields = [] if c is None else list(c.fact_fields or [])
    body = json.loads(rv.body_json)
    rows = [r for r in body.get("rows", []) if r.get("submission_id") is not None]
    ids = [r["submission_id"] for r in rows]
    sheets = {}
    for i in range(0, len(ids), 900):  # under SQLite's parameter limit
        q = select(Submission.id, Submission.facts).where(Submission.id.in_(ids[i : i + 900]))
        sheets.update({sid: f or {} for sid, f in s.exec(q)})
    out = []
    for r in rows:
        got = sheets.get(r["submission_id"], {})
        out.append(
            {
                "rank": r.get("rank"),
                "row_type": r.get("row_type"),
                "team": r.get("team", ""),
                "method_name": r.get("method_name", ""),
                "submission_id": r["submission_id"],
                "facts": {f["key"]: got.get(f["key"]) for f in fields},
            }
        )
    return fields, out


def export_facts(s: Session, rv: RankingVersion, fmt: str, *, actor) -> bytes:
    """The fact sheets of a published version as CSV (a column per declared fact) or JSON;
    organizers of the task's competition only (None: the server's own shell)."""
    if actor is not None and not people.organizes_task(s, actor, rv.task_id):
        raise Forbidden("the fact sheets are for the competition's organizers", "not_organizer")
    fields, rows = fact_rows(s, rv)
    if fmt == "json":
        doc = {
            "task": rv.task_id,
            "phase": rv.phase_name,
            "version": rv.version,
            "fields": fields,
            "rows": rows,
        }
        return json.dumps(doc, ensure_ascii=False, indent=1).encode("utf-8")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        ["rank", "row_type", "team", "method_name", "submission_id"] + [f["key"] for f in fields]
    )
    for r in rows:
        w.writerow(
            ["" if r["rank"] is None else r["rank"], r["row_type"]]
            + [_safe(r["team"]), _safe(r["method_name"]), r["submission_id"]]
            + [_safe(shown(r["facts"][f["key"]])) for f in fields]
        )
    return buf.getvalue().encode("utf-8")


def _safe(v: str) -> str:
    # a cell starting with = + - @ runs as a formula in spreadsheets (CSV injection)
    v = (v or "").strip()
    return "'" + v if v[:1] in ("=", "+", "-", "@", "\t", "\r") else v
