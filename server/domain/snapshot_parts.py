"""Every part's scores on a published snapshot's rows, written once for the board.

A snapshot's row keeps every score of every part of its ranked run (`parts`: primary, metrics,
notes, signature, provenance). At 2,000 rows on a phase with a private part the same metric names
(three subsets of eight metrics, twice a row) and the same provenance and signature (one gold,
one scorer) made most of the published JSON. The compact form says each once for the board:

- `part_metrics`: the metrics' names, `[subset, metric]` in their order; a part whose metrics
  are exactly these (the same names in the same order, each a value) gives them as a list of
  values in that order; any other part keeps its `{subset: {metric: value}}` as before;
- `part_provenance`: the distinct `{"signature", "provenance"}` of the parts; each part names
  its own by its index there (`provenance`: an integer) and has no `signature` of its own.

Nothing is rounded or left out: `expand` gives back the full form, byte for byte as
`json.dumps` wrote it before (`tests/test_snapshot_parts.py`). A snapshot without `part_metrics`
is one published in the full form and stays so (`is_compact`).
"""

from __future__ import annotations

import json
from typing import Any

METRICS = "part_metrics"
PROVENANCE = "part_provenance"


def is_compact(body: dict) -> bool:
    """Whether a snapshot's body is in the compact form (one published since it exists)."""
    return METRICS in body


def _names(metrics) -> list[tuple[str, str]] | None:
    """The `(subset, metric)` names of a part's metrics in their order; None when they are not
    `{subset: {metric: value}}` with a scalar value each (kept as they are)."""
    if not isinstance(metrics, dict):
        return None
    out = []
    for subset, inner in metrics.items():
        if not isinstance(inner, dict):
            return None
        for name, v in inner.items():
            if isinstance(v, (dict, list)):
                return None
            out.append((subset, name))
    return out


def compact(body: dict[str, Any]) -> dict[str, Any]:
    """The snapshot's body (as `snapshot_dict` makes it) with its rows' parts in the compact
    form; the body is changed in place and returned."""
    names: list[tuple[str, str]] | None = None
    counts: dict[tuple, int] = {}
    for row in body.get("rows", []):  # the most common metric names
        for part in (row.get("parts") or {}).values():
            got = _names(part.get("metrics"))
            if got:
                key = tuple(got)
                counts[key] = counts.get(key, 0) + 1
    if counts:
        names = list(max(counts, key=counts.__getitem__))
    provenances: list[dict] = []
    index: dict[str, int] = {}
    for row in body.get("rows", []):
        for part in (row.get("parts") or {}).values():
            if names is not None and _names(part.get("metrics")) == names:
                m = part["metrics"]
                part["metrics"] = [m[s][n] for s, n in names]
            shared = {
                "signature": part.pop("signature", ""),
                "provenance": part.get("provenance", {}),
            }
            key = json.dumps(shared, sort_keys=True, separators=(",", ":"))
            if key not in index:
                index[key] = len(provenances)
                provenances.append(shared)
            part["provenance"] = index[key]
    body[METRICS] = [list(x) for x in names or []]
    body[PROVENANCE] = provenances
    return body


def expand(body: dict[str, Any]) -> dict[str, Any]:
    """A snapshot's body in the full form (a copy): every part with its metrics by name, its
    signature and provenance. A body in the full form already is returned as it is."""
    if not is_compact(body):
        return body
    out = json.loads(json.dumps(body))
    names = [tuple(x) for x in out.pop(METRICS)]
    provenances = out.pop(PROVENANCE)
    for row in out.get("rows", []):
        parts = row.get("parts") or {}
        for key, part in parts.items():
            metrics = part["metrics"]
            if isinstance(metrics, list):
                nested: dict[str, dict] = {}
                for (subset, name), v in zip(names, metrics, strict=True):
                    nested.setdefault(subset, {})[name] = v
                metrics = nested
            shared = provenances[part["provenance"]]
            parts[key] = {
                "primary": part.get("primary"),
                "metrics": metrics,
                "notes": part.get("notes", []),
                "signature": shared["signature"],
                "provenance": shared["provenance"],
            }
    return out
