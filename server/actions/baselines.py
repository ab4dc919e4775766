"""Recording a baseline's submission file: through the one intake, as a team's upload is
(`server.actions.submissions.submit`), as an entry of the reserved baselines team; its scoring is
queued like any other, and nothing here ever writes a score. Recording the same file twice in a
phase answers with the first submission (deduplicated under the team lock), so re-running a
deterministic baseline adds no row. The leaderboard shows the newest scored entry per method."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlmodel import Session

from baselines.run import describe_run, recorded_method
from server import api_models as m
from server.actions.common import action
from server.actions.submissions import submit
from server.domain.baselines import baseline_phases, server_database, server_settings
from server.models import User
from server.settings import Settings


@dataclass
class Recorded:
    phase: str
    submission_id: int
    duplicate: bool

    def as_dict(self) -> dict:
        return {
            "phase": self.phase,
            "submission_id": self.submission_id,
            "duplicate": self.duplicate,
        }


@action
def record_file(
    *,
    s: Session,
    task_id: str,
    path: str | Path,
    method_name: str,
    description: str = "",
    phases: list[str] | None = None,
    settings: Settings,
    user: User | None = None,
    split: str = "test",
    facts: dict | None = None,
) -> list[Recorded]:
    """Submit `path` as a baseline entry of `task_id` in each of its phases on `split` (or
    `phases`), all in one transaction; `facts`: the fact sheet's answers it carries (its track),
    checked as any upload's."""
    path = Path(path)
    out = []
    for ph in baseline_phases(s, task_id, phases, split):
        fields = m.UploadFields(
            phase=ph.name,
            method_name=method_name,
            description=description,
            baseline=True,
            facts={k: str(v) for k, v in (facts or {}).items()},  # checked as any upload's sheet
        )
        with path.open("rb") as f:
            sub, duplicate = submit(
                s=s,
                user=user,
                task_id=task_id,
                fields=fields,
                stream=f,
                filename=path.name,
                settings=settings,
            )
        out.append(Recorded(ph.name, sub.id, duplicate))
    return out


def record_baseline(
    result: dict,
    *,
    home=None,
    phases: list[str] | None = None,
    settings: Settings | None = None,
    facts: dict | None = None,
) -> list[dict]:
    """Record one run of `run_baselines` on the leaderboard as a baseline entry.

    The file goes through the participants' path -- stored, validated and scored by the queue -- as
    a submission of the reserved baselines team, in every phase of the task on its test split (or
    in `phases`); the scores in `result` are never inserted. Into the server's database and queue
    of `home` (or of `settings`). Recording the same file again returns the first submission
    (`duplicate: true`). Returns one {phase, submission_id, duplicate} per phase.
    """
    method = recorded_method(result)
    if settings is None:
        settings = server_settings(home)
    with Session(server_database(settings), expire_on_commit=False) as s:
        rec = record_file(
            s=s,
            task_id=result["task"],
            path=result["file"],
            method_name=method,
            description=describe_run(result),
            phases=phases,
            settings=settings,
            split=result.get("split", "test"),
            facts=facts,
        )
    return [r.as_dict() for r in rec]
