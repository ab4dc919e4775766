"""A published snapshot's rows' parts in the compact form (server.domain.snapshot_parts): on a
generated phase of 2,000 teams with a private part (TRiC binary's shape: three subsets of eight
metrics, a public and a private part per row, each with its signature and provenance), the
published JSON is within 5 MB where the full form is over it, and the full form comes back byte for
byte; a part whose metrics are not the board's common ones keeps them by name; a snapshot
published in the full form is read as it is."""

from __future__ import annotations

import json
import random
from datetime import datetime

from server.boards import leaderboard as lb
from server.boards.board_model import BoardColumn, Leaderboard, LeaderboardRow
from server.domain import snapshot_parts
from server.domain.publication import snapshot_json

SUBSETS = ("all", "oov", "iov")
METRICS = ("f1", "precision_0", "recall_0", "f1_0", "precision_1", "recall_1", "f1_1", "n")
SECRET = "s" * 40
GOLD = "ab" * 32


def _result(rng: random.Random, part: str) -> dict:
    metrics = {
        sub: {m: (rng.randrange(20, 60) if m == "n" else rng.random()) for m in METRICS}
        for sub in SUBSETS
    }
    return {
        "part": part,
        "primary": {"name": "f1", "value": metrics["all"]["f1"]},
        "metrics": metrics,
        "notes": [],
        "signature": f"f1|task:tric-binary|v:1|split:test|gold:{GOLD}|scorer:0.1.0",
        "provenance": {"task_version": 1, "gold_sha256": GOLD, "scorer_version": "0.1.0"},
    }


def _board(teams: int, seed: int = 0) -> Leaderboard:
    rng = random.Random(seed)
    columns = [
        BoardColumn(subset=s, metric=m, greater_is_better=True, primary=(s, m) == ("all", "f1"))
        for s in SUBSETS
        for m in METRICS
    ]
    rows = []
    for i in range(teams):
        parts = {p: _result(rng, p) for p in ("public", "private")}
        values = {f"{s}/{m}": parts["private"]["metrics"][s][m] for s in SUBSETS for m in METRICS}
        lo = rng.random()
        rows.append(
            LeaderboardRow(
                rank=i + 1,
                row_type="team",
                team=f"team-{i:05d}",
                submission_id=10_000 + i,
                method_name="m",
                submitted_at=datetime(2026, 12, 1, 12, 0, i % 60),
                values=values,
                chosen_by="latest scored run",
                public_value=parts["public"]["primary"]["value"],
                public_rank=i + 1,
                ci=[lo, lo + 0.1],
                rank_range=[max(1, i - 3), i + 4],
                rank_set={"low": 1, "high": i + 4, "coverage": 0.95, "kind": "marginal"},
                rank_set_simultaneous={"low": 1, "high": i + 9, "coverage": 0.95},
                cluster=1 + i // 40,
                public_ci=[lo, lo + 0.12],
                parts=parts,
            )
        )
    return Leaderboard(
        task_id="tric-binary",
        phase="test",
        split="test",
        part="private",
        published=True,
        frozen=False,
        columns=columns,
        rows=rows,
    )


META = {"version": 1, "published_at": "2026-12-02T12:00:00Z", "published_by": None}


def test_a_2000_team_snapshot_with_a_private_part_is_within_5_mb_and_comes_back_whole():
    board = _board(2000)
    full = lb.snapshot_dict(board, dict(META), secret=SECRET)
    full_bytes = snapshot_json(full).encode()
    compact = snapshot_parts.compact(json.loads(json.dumps(full)))
    compact_bytes = snapshot_json(compact).encode()
    assert len(full_bytes) > 5_000_000  # the full form: over the goal
    assert len(compact_bytes) <= 5_000_000, len(compact_bytes)
    assert snapshot_parts.is_compact(compact) and not snapshot_parts.is_compact(full)
    # one signature and provenance for the board; every part's metrics a list of 24 values
    assert len(compact[snapshot_parts.PROVENANCE]) == 1
    assert "gold:" + GOLD not in compact_bytes.decode()  # the gold named by its keyed id only
    assert all(
        isinstance(p["metrics"], list) and len(p["metrics"]) == 24 and p["provenance"] == 0
        for r in compact["rows"]
        for p in r["parts"].values()
    )
    # nothing lost: the full form back, byte for byte
    assert snapshot_json(snapshot_parts.expand(compact)).encode() == full_bytes
    # the board, the CSV and the exports read it as they read the full form
    assert lb.snapshot_csv(compact) == lb.snapshot_csv(full)


def test_a_part_of_other_metrics_keeps_them_by_name_and_a_full_snapshot_is_read_as_it_is():
    board = _board(6, seed=1)
    odd = board.rows[2].parts["public"]
    odd["metrics"] = {"all": {"f1": 0.5, "extra": 1.0}, "oov": {"f1": None}}  # other names
    board.rows[3].parts["private"]["metrics"] = None  # none at all
    board.rows[4].parts["private"]["metrics"]["iov"]["curve"] = [0.1, 0.2]  # not a value
    board.rows[5].parts["public"]["signature"] = "f1|task:tric-binary|v:2|scorer:0.2.0"
    board.rows[5].parts["public"]["provenance"]["task_version"] = 2
    full = lb.snapshot_dict(board, dict(META), secret=SECRET)
    compact = snapshot_parts.compact(json.loads(json.dumps(full)))
    rows = compact["rows"]
    assert rows[2]["parts"]["public"]["metrics"] == odd["metrics"]
    assert rows[3]["parts"]["private"]["metrics"] is None
    assert isinstance(rows[4]["parts"]["private"]["metrics"], dict)
    assert isinstance(rows[4]["parts"]["public"]["metrics"], list)
    assert rows[5]["parts"]["public"]["provenance"] == 1  # a second provenance, its own index
    assert len(compact[snapshot_parts.PROVENANCE]) == 2
    assert snapshot_json(snapshot_parts.expand(compact)) == snapshot_json(full)
    assert snapshot_parts.expand(full) is full  # published before the compact form
